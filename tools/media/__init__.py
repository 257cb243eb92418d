"""Media tools: sending files, image generation, speech and vision_analyze."""
