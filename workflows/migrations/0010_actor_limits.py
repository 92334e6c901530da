import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0009_step_kind_intent"),
    ]

    operations = [
        migrations.AddField(
            model_name="actor",
            name="max_concurrency",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="calls in flight at once, across every worker (empty: no limit)",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="actor",
            name="max_calls_per_minute",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="calls started in any minute, across every worker (empty: no limit)",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddConstraint(
            model_name="actor",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("max_concurrency__isnull", True),
                    ("max_concurrency__gte", 1),
                    _connector="OR",
                ),
                name="actor_max_concurrency_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="actor",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("max_calls_per_minute__isnull", True),
                    ("max_calls_per_minute__gte", 1),
                    _connector="OR",
                ),
                name="actor_max_calls_per_minute_positive",
            ),
        ),
    ]
