"""Inbound webhooks: `POST /api/hooks/{slug}/{name}` starts a run of the recipe's latest
published version from a request signed by the Standard Webhooks scheme (`services.py`); each
delivery that passed the signature check is recorded (`models.py`) and shown in the editor's
Triggers tab."""
