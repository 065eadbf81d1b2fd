// Placeholder main: replaced by the runtime CLI.
#include <cstdio>
int main() { std::fprintf(stderr, "fuserun: not built yet\n"); return 1; }
