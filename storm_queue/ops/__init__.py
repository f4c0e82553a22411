"""The operator's tools: doctor, adopt, migrate, init and demo."""
