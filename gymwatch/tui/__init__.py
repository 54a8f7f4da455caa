"""The live screen (`gymwatch attach PATH`), and the screens the runs browser borrows from it."""
