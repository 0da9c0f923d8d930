// Chat templates come with the model file (tokenizer.chat_template): any template text
// renders or fails with tsr::Error, within bounded time and memory, whatever the messages.
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const std::vector<tsr::ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi {{ not a template }}"}, {"assistant", "Hello!"}, {"user", "\xE6\x97\xA5 again"}};
  try {
    tsr::apply_chat_template(text, messages, true, "<s>", "</s>");
  } catch (const tsr::Error&) {
  }
  return 0;
}
