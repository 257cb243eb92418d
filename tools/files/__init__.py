"""File tools and the workspace they work in: read/write/edit, glob and search, saved
attachments, the race-free workspace jail and per-conversation workspaces."""
