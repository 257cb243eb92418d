"""Spending: token and cost accounting per turn, totals per person, chat, profile, scheduled
job and model per day and month in the store, and the limits in `[budgets]`."""
