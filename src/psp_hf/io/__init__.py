"""File input and output: sentence, pair and JSON files read with `FILE:LINE` errors (`reading.py`), atomic writes
(`writing.py`), files read a block of lines at a time (`lines.py`) and float32 `.npy` files written row by row
(`npy.py`)."""
