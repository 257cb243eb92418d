"""Media in and out of the chat: what a file really is (sniff), images prepared for the model,
attachment notes in history, the OpenAI-compatible speech and image services, and the turn's
handling of what the person sent (transcription, image parts, voice replies).
"""
