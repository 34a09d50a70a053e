/* Defines symbols under versions named like libstdc++'s (see verdef.map and README.md). */
int fixture_old(void) { return 1; }
int fixture_mid(void) { return 2; }
int fixture_new(void) { return 3; }
int fixture_abi(void) { return 4; }
int fixture_abi_new(void) { return 5; }
int fixture_tm(void) { return 6; }
