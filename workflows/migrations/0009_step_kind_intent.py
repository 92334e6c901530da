from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0008_branch_counts_as"),
    ]

    operations = [
        migrations.AlterField(
            model_name="step",
            name="kind",
            field=models.CharField(
                choices=[
                    ("llm", "LLM"),
                    ("human", "Human review"),
                    ("decision_tree", "Decision tree"),
                    ("classify", "Classify"),
                    ("retrieve", "Retrieve (search sources)"),
                    ("tool", "Tool (call an MCP tool)"),
                    ("intent", "Intent (request → success criteria)"),
                ],
                default="llm",
                max_length=20,
            ),
        ),
    ]
