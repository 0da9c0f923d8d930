// Stop strings for one request's streamed text (OpenAI `stop` semantics: the text ends
// before the stop string, which itself is not returned).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tsr {

// Text arrives in pieces; what might still be the start of a stop string is held back
// until the next pieces tell. Each push() examines only the held-back tail (shorter than
// the longest stop string) and the new text, so its cost does not grow with the text
// generated before it.
//
// The stop is the occurrence that is completed first when reading the text in order
// (the one that ends earliest), because generation stops as soon as a stop string
// appears, however the text was split into pieces. Among occurrences ending at the same
// place the longest wins, so all of it is cut; between equal stop strings, the one
// listed first.
class StopMatcher {
 public:
  struct Result {
    std::string text;       // safe to release now
    bool stopped = false;   // a stop string occurred; `text` ends right before it
    size_t stop_index = 0;  // which one, as an index into the constructor's list
  };

  // Empty stop strings are ignored (they would stop before any text).
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends newly generated text. After a stop, returns nothing more.
  Result push(std::string_view text);

  // At the end of generation without a stop: releases the held-back text.
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  struct Found {
    size_t start, end, index;
  };
  Found earliest_stop() const;
  size_t held_back_length() const;

  std::vector<std::string> stops_;  // as given, empty ones included, so indices match
  std::string pending_;             // received but not yet released
  bool stopped_ = false;
};

}  // namespace tsr
