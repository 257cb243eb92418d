"""Agent profiles: which persona, models, tools and limits a turn gets, chosen per platform,
chat, thread or person by `[[profiles.bind]]` rules; `/model` and `/profile` in chats."""
