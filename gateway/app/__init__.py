"""The composition root: builds every part from Settings, runs it (`chatgate run`), and the CLI
and doctor around it. The only package that imports adapters/ and tools/."""
