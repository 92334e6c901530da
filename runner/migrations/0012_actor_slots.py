from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0011_steprun_variant_choice"),
    ]

    operations = [
        migrations.CreateModel(
            name="ActorSlot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("actor", models.CharField(max_length=200)),
                ("run_id", models.BigIntegerField(blank=True, null=True)),
                ("seq", models.PositiveIntegerField(blank=True, null=True)),
                ("acquired_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
                ("released_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["actor", "acquired_at"], name="actor_slot_by_actor")
                ],
            },
        ),
    ]
