"""What a run records: the statement recorder that both backends drive, values read from
frames, the per-line aggregates, and which code is the user's."""
