# Helpers shared by the benchmark scripts (sourced, not run).

# The median of the numbers on standard input, one per line; fails on none.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
