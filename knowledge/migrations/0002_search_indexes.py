"""What search reads: the full-text index of chunks, and an index of the embedded ones.

Full text: FTS5 and triggers on SQLite, a generated tsvector with a GIN index on PostgreSQL.
The statements live in `knowledge/fulltext.py`, next to the queries that read the index and
the repair that runs after every migrate (SQLite loses triggers when Django copies a table).
"""

from django.db import migrations, models

from knowledge import fulltext


def create_fulltext(apps, schema_editor):  # type: ignore[no-untyped-def]
    fulltext.create_index(schema_editor)


def drop_fulltext(apps, schema_editor):  # type: ignore[no-untyped-def]
    fulltext.drop_index(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [
        migrations.AddIndex(
            model_name="chunk",
            index=models.Index(
                condition=models.Q(("embedding__isnull", False)),
                fields=["knowledge_base", "id"],
                name="knowledge_chunk_embedded",
            ),
        ),
        migrations.RunPython(create_fulltext, drop_fulltext),
    ]
