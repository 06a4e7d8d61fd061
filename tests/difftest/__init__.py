"""The parts of tests/difftest.py, the differential tester: model (types and nodes), syntax
(the text format), gen (random programs), data (lengths patterns and .npy files), ref and
evaluate (the NumPy reference), check (running ragjit and judging outputs), shrink (minimal
reproducers), invalid (programs and data ragjit must refuse)."""
