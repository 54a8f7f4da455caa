"""The live screen (`gymwatch attach PATH`). The only package that imports Textual."""
