#include "core/request/stop_matcher.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tsr {
namespace {

using Stops = std::vector<std::string>;

struct Streamed {
  std::string released;
  bool stopped = false;
  size_t stop_index = 0;
  std::vector<std::string> pieces;  // each push's text, then flush's
};

// Pushes `chunks` in order, checking that nothing comes after a stop; flushes if none.
Streamed stream(const Stops& stops, const std::vector<std::string>& chunks) {
  StopMatcher matcher(stops);
  Streamed out;
  for (const std::string& chunk : chunks) {
    const StopMatcher::Result r = matcher.push(chunk);
    EXPECT_TRUE(!out.stopped || (r.text.empty() && !r.stopped)) << "output after the stop";
    if (r.stopped) {
      out.stopped = true;
      out.stop_index = r.stop_index;
    }
    out.released += r.text;
    out.pieces.push_back(r.text);
  }
  if (!out.stopped) {
    out.pieces.push_back(matcher.flush());
    out.released += out.pieces.back();
  }
  return out;
}

std::vector<std::string> characters(const std::string& text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  const Streamed s = stream({}, {"ab", "", "c"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"ab", "", "c", ""}));
  EXPECT_FALSE(s.stopped);
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  const Streamed s = stream({"", "c"}, {"ab", "cd"});
  EXPECT_EQ(s.released, "ab");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_index, 1u);
}

TEST(StopMatcher, StopSpanningOneCharacterPushes) {
  const Streamed s = stream({"###"}, characters("x##y###z"));
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"x", "", "", "##y", "", "", "", ""}));
  EXPECT_EQ(s.released, "x##y");
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, StopInsideOnePush) {
  const Streamed s = stream({"END"}, {"abcENDdef"});
  EXPECT_EQ(s.released, "abc");
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, HeldBackPrefixThatIsNoStopIsReleasedLater) {
  const Streamed s = stream({"</s>"}, {"a</", "b>", "c"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"a", "</b>", "c", ""}));
  EXPECT_FALSE(s.stopped);
}

TEST(StopMatcher, FlushReleasesTheHeldBackTail) {
  const Streamed s = stream({"\n\nUser:"}, {"Hi.", "\n", "\nUs"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"Hi.", "", "", "\n\nUs"}));
  EXPECT_EQ(s.released, "Hi.\n\nUs");
}

TEST(StopMatcher, StopAtTheVeryBeginning) {
  const Streamed s = stream({"stop"}, {"st", "op", "more"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"", "", ""}));
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, OverlappingPattern) {
  // "aa" is held back, then "aaa" (its suffix "aa" may still begin "aab").
  const Streamed s = stream({"aab"}, characters("aaab"));
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_EQ(s.released, "a");
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, SelfOverlappingPatternHoldsTheLongestPossibleStart) {
  // After "abab" both "abab" and "ab" may begin "ababc"; the longer one is held.
  const Streamed s = stream({"ababc"}, {"x", "abab", "abc"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"x", "", "ab"}));
  EXPECT_EQ(s.released, "xab");
}

TEST(StopMatcher, SharedPrefixesStopAtTheFirstCompleted) {
  const Stops stops = {"Question:", "Quest", "Qx"};
  EXPECT_EQ(stream(stops, characters("a Question: b")).stop_index, 1u);
  EXPECT_EQ(stream(stops, characters("a Quit")).released, "a Quit");
  const Streamed qx = stream(stops, characters("Qu Qx"));
  EXPECT_EQ(qx.released, "Qu ");
  EXPECT_EQ(qx.stop_index, 2u);
}

TEST(StopMatcher, EarliestEndingStopWinsRegardlessOfChunking) {
  // "bc" completes before "abcd" could, whether the text comes at once or not.
  const Stops stops = {"abcd", "bc"};
  for (const auto& chunks : {std::vector<std::string>{"abcd"}, characters("abcd")}) {
    const Streamed s = stream(stops, chunks);
    EXPECT_EQ(s.released, "a");
    EXPECT_EQ(s.stop_index, 1u);
  }
}

TEST(StopMatcher, SameEndPrefersTheLongerStop) {
  const Streamed s = stream({"b", "ab", "ab"}, {"xab"});
  EXPECT_EQ(s.released, "x");
  EXPECT_EQ(s.stop_index, 1u);
}

TEST(StopMatcher, NothingAfterTheStop) {
  StopMatcher matcher({"!"});
  EXPECT_TRUE(matcher.push("hi!there").stopped);
  EXPECT_TRUE(matcher.stopped());
  const StopMatcher::Result after = matcher.push("more!");
  EXPECT_EQ(after.text, "");
  EXPECT_FALSE(after.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, MultiByteCharactersAreNotSplit) {
  // Held-back text starts where a stop string starts: at a character boundary.
  const Streamed s = stream({"\xC3\xA9t\xC3\xA9"}, {"caf\xC3\xA9", " \xC3\xA9t", "\xC3\xA9"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"caf", "\xC3\xA9 ", ""}));
}

// --- Against a naive reference ------------------------------------------------------

struct Expected {
  std::string released;
  bool stopped = false;
  size_t stop_index = 0;
};

// Reads the whole text one byte at a time and stops at the first position where some
// stop string ends, taking the longest one ending there (the first listed among equals).
Expected naive(const Stops& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    const std::string_view seen = std::string_view(text).substr(0, end);
    std::optional<size_t> best;
    for (size_t i = 0; i < stops.size(); ++i) {
      if (stops[i].empty() || !seen.ends_with(stops[i])) continue;
      if (!best || stops[i].size() > stops[*best].size()) best = i;
    }
    if (best) return {text.substr(0, end - stops[*best].size()), true, *best};
  }
  return {text};
}

std::string random_text(std::mt19937& rng, size_t max_length) {
  std::uniform_int_distribution<size_t> length(0, max_length);
  std::uniform_int_distribution<int> letter(0, 2);  // a tiny alphabet makes stops likely
  std::string out(length(rng), ' ');
  for (char& c : out) c = static_cast<char>('a' + letter(rng));
  return out;
}

TEST(StopMatcher, MatchesNaiveReferenceOnRandomText) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> n_stops(0, 3);
  std::uniform_int_distribution<size_t> chunk_length(0, 4);
  size_t stopped = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    Stops stops;
    for (int i = n_stops(rng); i > 0; --i) stops.push_back(random_text(rng, 5));
    const std::string text = random_text(rng, 40);
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < text.size();) {
      chunks.push_back(text.substr(pos, chunk_length(rng)));
      pos += chunks.back().size();
    }
    const Expected expected = naive(stops, text);
    const Streamed got = stream(stops, chunks);
    ASSERT_EQ(got.released, expected.released) << "trial " << trial;
    ASSERT_EQ(got.stopped, expected.stopped) << "trial " << trial;
    if (expected.stopped) {
      ASSERT_EQ(got.stop_index, expected.stop_index) << "trial " << trial;
    }
    stopped += expected.stopped;
  }
  EXPECT_GT(stopped, 5000u);  // both outcomes are exercised
  EXPECT_LT(stopped, 19000u);
}

// Releasing does not wait for the end: only what may begin a stop string stays behind.
TEST(StopMatcher, HoldsBackOnlyAPossibleStopStart) {
  StopMatcher matcher({"abcaz", "zz"});  // no 'z' is generated: they never complete
  std::string pushed, released;
  size_t most_held = 0;
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::string chunk(1, static_cast<char>('a' + rng() % 3));
    pushed += chunk;
    released += matcher.push(chunk).text;
    most_held = std::max(most_held, pushed.size() - released.size());
  }
  EXPECT_EQ(most_held, 4u);
  EXPECT_EQ(released + matcher.flush(), pushed);
}

}  // namespace
}  // namespace tsr
