// placeholder until the GGUF helper writes it
#include "apps/tessera/commands.h"
int tsr::app::cmd_inspect(const std::string&, bool) { return 1; }
