"""What a rank of a distributed run records beyond lines and values: the collectives it
calls and where its main thread is, so the merge can say where ranks stopped meeting."""
