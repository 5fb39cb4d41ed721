// weights: see weights.h
