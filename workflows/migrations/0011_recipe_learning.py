from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0010_actor_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipe",
            name="learning",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
