from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0011_recipe_learning"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipe",
            name="draft_document",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
