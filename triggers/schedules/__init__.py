"""Schedules: runs of a recipe's latest published version started on the times its
`schedules` name (cron in a time zone), exactly once per tick whatever the number of beat
and worker processes; ticks missed while nothing looked are recorded, and run only when the
schedule asks to catch up; each schedule may be paused and resumed."""
