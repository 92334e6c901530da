"""The full-text index of chunks, and the ranked full-text query over it, per database.

- SQLite: an FTS5 table `knowledge_chunk_fts` with external content (`knowledge_chunk`'s
  `text` and `heading`, tokenizer `porter unicode61`), kept in sync by triggers on every
  insert, update and delete of a chunk; ranked by bm25 (the heading weighs double).
- PostgreSQL: a generated, stored `search_vector` column (the heading weighted A) with a
  GIN index; ranked by `ts_rank_cd(search_vector, query, 32)`.

Both created by migration 0002. A user's query is parsed here (`parse_query`), never handed
to either engine as syntax: its words and "quoted phrases" are alternatives (a question's
words need not all appear, more of them rank higher), `-word` and `-"phrase"` exclude, and
English stop words are dropped. Scores are rank/(rank+1), in [0, 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connections
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# -- the index --------------------------------------------------------------------------------

_SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_chunk_fts USING fts5("
    "text, heading, content='knowledge_chunk', content_rowid='id', "
    "tokenize='porter unicode61')"
)
# External content: the FTS table stores only the index, so it is told both the old values
# (to remove) and the new ones (to add). Updates that touch neither column skip it.
_SQLITE_TRIGGERS = {
    "knowledge_chunk_fts_insert": (
        "CREATE TRIGGER IF NOT EXISTS knowledge_chunk_fts_insert AFTER INSERT ON knowledge_chunk "
        "BEGIN INSERT INTO knowledge_chunk_fts(rowid, text, heading) "
        "VALUES (new.id, new.text, new.heading); END"
    ),
    "knowledge_chunk_fts_delete": (
        "CREATE TRIGGER IF NOT EXISTS knowledge_chunk_fts_delete AFTER DELETE ON knowledge_chunk "
        "BEGIN INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts, rowid, text, heading) "
        "VALUES ('delete', old.id, old.text, old.heading); END"
    ),
    "knowledge_chunk_fts_update": (
        "CREATE TRIGGER IF NOT EXISTS knowledge_chunk_fts_update "
        "AFTER UPDATE OF text, heading ON knowledge_chunk "
        "BEGIN INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts, rowid, text, heading) "
        "VALUES ('delete', old.id, old.text, old.heading); "
        "INSERT INTO knowledge_chunk_fts(rowid, text, heading) "
        "VALUES (new.id, new.text, new.heading); END"
    ),
}
_SQLITE_REBUILD = "INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts) VALUES ('rebuild')"
_POSTGRES_CREATE = (
    "ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
    "(setweight(to_tsvector('english', heading), 'A') || to_tsvector('english', text)) STORED",
    "CREATE INDEX knowledge_chunk_search_vector ON knowledge_chunk USING GIN (search_vector)",
)
_POSTGRES_DROP = (
    "DROP INDEX IF EXISTS knowledge_chunk_search_vector",
    "ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS search_vector",
)


def create_index(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Create the full-text index for the database (migration 0002), indexing every chunk."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        statements = [_SQLITE_TABLE, *_SQLITE_TRIGGERS.values(), _SQLITE_REBUILD]
    elif vendor == "postgresql":
        statements = list(_POSTGRES_CREATE)
    else:
        raise NotImplementedError(f"no full-text index for {vendor}")
    for statement in statements:
        schema_editor.execute(statement)


def drop_index(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Drop what `create_index` made (migration 0002 reversed)."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        statements = [f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS]
        statements.append("DROP TABLE IF EXISTS knowledge_chunk_fts")
    elif vendor == "postgresql":
        statements = list(_POSTGRES_DROP)
    else:
        return
    for statement in statements:
        schema_editor.execute(statement)


def repair_sqlite_triggers(using: str = "default") -> bool:
    """Recreate missing triggers and rebuild the index; return whether anything was missing.

    Django alters a SQLite table by copying it into a new one, and the copy has none of the
    old table's triggers: after a later migration of `knowledge_chunk` the index would go
    stale without a word. Run after every `migrate` (see apps.py).
    """
    connection = connections[using]
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, type FROM sqlite_master WHERE name = 'knowledge_chunk_fts' "
            "OR (type = 'trigger' AND tbl_name = 'knowledge_chunk')"
        )
        present = {name for name, _ in cursor.fetchall()}
        if "knowledge_chunk_fts" not in present or set(_SQLITE_TRIGGERS) <= present:
            return False
        for statement in _SQLITE_TRIGGERS.values():
            cursor.execute(statement)
        cursor.execute(_SQLITE_REBUILD)
    return True


# -- queries ----------------------------------------------------------------------------------

# PostgreSQL's English stop words (tsearch_data/english.stop): both databases drop the same.
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now
    """.split()  # noqa: SIM905
)
# More terms than this in one query (a long prompt used as the query) add little but cost.
MAX_TERMS = 64
_PHRASE = re.compile(r'(-?)"([^"]*)"?')
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ParsedQuery:
    """A user's query: terms (words or phrases, as word tuples) that count, and that exclude."""

    include: tuple[tuple[str, ...], ...]
    exclude: tuple[tuple[str, ...], ...]


def parse_query(text: str) -> ParsedQuery:
    """Return the words and phrases of `text` to look for and to exclude.

    Quotes make a phrase ("two factor"), a leading `-` excludes a word or a phrase; every
    other character is a separator, so nothing the user types is query syntax.
    """
    include: list[tuple[str, ...]] = []
    exclude: list[tuple[str, ...]] = []

    def add(words: list[str], negated: bool, phrase: bool) -> None:
        target = exclude if negated else include
        if phrase and len(words) > 1:
            if tuple(words) not in target:
                target.append(tuple(words))
            return
        for word in words:
            if word not in STOP_WORDS and (word,) not in target:
                target.append((word,))

    rest: list[str] = []
    position = 0
    lowered = text.lower()
    for match in _PHRASE.finditer(lowered):
        rest.append(lowered[position : match.start()])
        position = match.end()
        add(_WORD.findall(match[2]), bool(match[1]), phrase=True)
    rest.append(lowered[position:])
    for token in " ".join(rest).split():
        negated = token.startswith("-") and len(token) > 1
        add(_WORD.findall(token), negated, phrase=False)
    return ParsedQuery(tuple(include[:MAX_TERMS]), tuple(exclude[:MAX_TERMS]))


def fulltext_ranking(
    base_id: int, query: ParsedQuery, *, limit: int, using: str = "default"
) -> list[tuple[int, float]]:
    """Return up to `limit` (chunk id, score) of the base's chunks that match, best first."""
    if not query.include or limit <= 0:
        return []
    connection = connections[using]
    if connection.vendor == "postgresql":
        sql, params = _postgres_sql(base_id, query, limit)
    elif connection.vendor == "sqlite":
        sql, params = _sqlite_sql(base_id, query, limit)
    else:
        raise NotImplementedError(f"no full-text search for {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]


def _sqlite_sql(base_id: int, query: ParsedQuery, limit: int) -> tuple[str, list[object]]:
    def quoted(term: tuple[str, ...]) -> str:
        # An FTS5 string: the words of a term are only ever \w characters, never syntax.
        return '"' + " ".join(term) + '"'

    match = " OR ".join(quoted(term) for term in query.include)
    if query.exclude:
        match = f"({match}) NOT ({' OR '.join(quoted(term) for term in query.exclude)})"
    # bm25 is lower for better matches; its negation is the rank, mapped to r/(r+1).
    sql = (
        "SELECT c.id, -bm25(knowledge_chunk_fts, 1.0, 2.0) / (1.0 - bm25(knowledge_chunk_fts, "
        "1.0, 2.0)) AS score FROM knowledge_chunk_fts JOIN knowledge_chunk c "
        "ON c.id = knowledge_chunk_fts.rowid WHERE knowledge_chunk_fts MATCH %s "
        "AND c.knowledge_base_id = %s ORDER BY score DESC, c.id LIMIT %s"
    )
    return sql, [match, base_id, limit]


def _postgres_sql(base_id: int, query: ParsedQuery, limit: int) -> tuple[str, list[object]]:
    # phraseto_tsquery stems the words and keeps their order; a term of one word is a word.
    term = "phraseto_tsquery('english', %s)"
    include = " || ".join([term] * len(query.include))
    tsquery = f"({include})"
    if query.exclude:
        tsquery += " && !!(" + " || ".join([term] * len(query.exclude)) + ")"
    sql = (
        "SELECT c.id, ts_rank_cd(c.search_vector, q.query, 32) AS score "
        f"FROM knowledge_chunk c, (SELECT {tsquery} AS query) q "
        "WHERE c.knowledge_base_id = %s AND c.search_vector @@ q.query "
        "ORDER BY score DESC, c.id LIMIT %s"
    )
    words = [" ".join(t) for t in query.include] + [" ".join(t) for t in query.exclude]
    return sql, [*words, base_id, limit]
