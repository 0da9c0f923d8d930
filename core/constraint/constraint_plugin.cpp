#include "core/constraint/constraint_plugin.h"

#include "base/error.h"
#include "core/plugin_host/host_services.h"

namespace tsr {

namespace {

std::vector<std::string> split_kinds(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (comma != 0) out.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

// The entries ABI 2.3 appended: inside the plugin's table (a 2.2 plugin's is shorter), and set.
bool has_compile_limited(const tsr_constraint_iface& t) {
  return TSR_STRUCT_HAS(&t, tsr_constraint_iface, grammar_compile_limited) && t.grammar_compile_limited != nullptr;
}
bool has_grammar_bytes(const tsr_constraint_iface& t) {
  return TSR_STRUCT_HAS(&t, tsr_constraint_iface, grammar_bytes) && t.grammar_bytes != nullptr;
}

}  // namespace

ConstraintPlugin::ConstraintPlugin(std::shared_ptr<Plugin> plugin, size_t mask_words)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_constraint_iface*>(plugin_->iface())),
      mask_words_(mask_words),
      name_(plugin_->name()),
      kinds_(split_kinds(iface_->kinds)) {}

std::shared_ptr<ConstraintPlugin> ConstraintPlugin::create(std::shared_ptr<Plugin> plugin,
                                                           const TokenVocab& vocab) {
  std::shared_ptr<ConstraintPlugin> p(new ConstraintPlugin(std::move(plugin), vocab.mask_words()));
  if (p->kinds_.empty()) throw Error("constraint plugin '" + p->name_ + "' lists no kinds");
  call_plugin("constraint plugin '" + p->name_ + "' vocab_create", [&](tsr_error** e) {
    return p->iface_->vocab_create(&vocab.desc(), &p->vocab_, e);
  });
  return p;
}

ConstraintPlugin::~ConstraintPlugin() {
  if (vocab_ != nullptr) iface_->vocab_destroy(vocab_);  // NULL when vocab_create failed
}

bool ConstraintPlugin::serves(std::string_view kind) const {
  for (const std::string& k : kinds_) {
    if (k == kind) return true;
  }
  return false;
}

std::shared_ptr<CompiledConstraint> ConstraintPlugin::compile(const ConstraintSpec& spec,
                                                             const std::function<bool()>& should_stop) const {
  tsr_grammar* grammar = nullptr;
  const bool limited = should_stop && has_compile_limited(*iface_);
  tsr_compile_limits limits{sizeof(limits), [](void* ctx) -> int32_t {
                              return (*static_cast<const std::function<bool()>*>(ctx))() ? 1 : 0;
                            },
                            const_cast<std::function<bool()>*>(&should_stop), nullptr};
  call_plugin(spec.kind + " constraint", [&](tsr_error** e) {
    if (limited) {
      return iface_->grammar_compile_limited(vocab_, spec.kind.c_str(), spec.text.data(), spec.text.size(),
                                             &limits, &grammar, e);
    }
    return iface_->grammar_compile(vocab_, spec.kind.c_str(), spec.text.data(), spec.text.size(),
                                   &grammar, e);
  });
  return std::shared_ptr<CompiledConstraint>(
      new CompiledConstraint(shared_from_this(), grammar, mask_words_));
}

CompiledConstraint::CompiledConstraint(std::shared_ptr<const ConstraintPlugin> plugin,
                                       tsr_grammar* grammar, size_t mask_words)
    : plugin_(std::move(plugin)), grammar_(grammar), mask_words_(mask_words) {}

CompiledConstraint::~CompiledConstraint() { plugin_->iface_->grammar_destroy(grammar_); }

size_t CompiledConstraint::bytes() const {
  const tsr_constraint_iface& t = *plugin_->iface_;
  return has_grammar_bytes(t) ? t.grammar_bytes(grammar_) : 0;
}

std::unique_ptr<ConstraintMatcher> CompiledConstraint::new_matcher() {
  tsr_matcher* m = nullptr;
  call_plugin("constraint plugin '" + plugin_->name_ + "' matcher_create",
              [&](tsr_error** e) { return plugin_->iface_->matcher_create(grammar_, &m, e); });
  return std::unique_ptr<ConstraintMatcher>(new ConstraintMatcher(shared_from_this(), m));
}

const tsr_constraint_iface& ConstraintMatcher::iface() const { return *grammar_->plugin_->iface_; }

ConstraintMatcher::~ConstraintMatcher() { iface().matcher_destroy(handle_); }

void ConstraintMatcher::fill_mask(std::span<uint32_t> mask) {
  call_plugin("constraint fill_mask", [&](tsr_error** e) {
    return iface().matcher_fill_mask(handle_, mask.data(), mask.size(), e);
  });
}

bool ConstraintMatcher::accept(int32_t token) { return iface().matcher_accept(handle_, token) == 1; }

void ConstraintMatcher::rollback(size_t n) {
  call_plugin("constraint rollback",
              [&](tsr_error** e) { return iface().matcher_rollback(handle_, n, e); });
}

std::unique_ptr<ConstraintMatcher> ConstraintMatcher::fork() const {
  tsr_matcher* m = nullptr;
  call_plugin("constraint fork", [&](tsr_error** e) { return iface().matcher_fork(handle_, &m, e); });
  return std::unique_ptr<ConstraintMatcher>(new ConstraintMatcher(grammar_, m));
}

bool ConstraintMatcher::is_terminated() const { return iface().matcher_is_terminated(handle_) == 1; }
bool ConstraintMatcher::can_terminate() const { return iface().matcher_can_terminate(handle_) == 1; }

}  // namespace tsr
