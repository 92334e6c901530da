from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0010_steprun_outcome"),
    ]

    operations = [
        migrations.AddField(
            model_name="steprun",
            name="variant",
            field=models.CharField(blank=True, db_default="", max_length=200),
        ),
        migrations.AddField(
            model_name="steprun",
            name="choice",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
