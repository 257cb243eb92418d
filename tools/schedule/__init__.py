"""The cron tools: reminders and scheduled prompts the model sets for its chat."""
