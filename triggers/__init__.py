"""What starts runs and what hears of them besides people: schedules, inbound webhooks and
callbacks out. Each is one module (with its models, services and API); the editor's Triggers
tab shows them."""
