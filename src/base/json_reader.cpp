#include "base/json_reader.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace revis {
namespace {

// The vector underneath an ordered object, whose own insert would scan it.
nlohmann::ordered_json::object_t::Container& members_of(nlohmann::ordered_json& object) {
  return object.get_ref<nlohmann::ordered_json::object_t&>();
}

// A SAX handler that builds `Json`, keeping each open container in a
// frame until it closes.
template <class Json>
class TreeBuilder {
 public:
  explicit TreeBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(typename Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t&) { return add(Json(v)); }
  bool string(typename Json::string_t& v) { return add(Json(std::move(v))); }
  bool binary(typename Json::binary_t&) { return fail("binary values are not JSON text"); }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool key(typename Json::string_t& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_array() { return close(); }
  bool end_object() {
    Frame& f = frames_.back();
    f.value = build_object(std::move(f.members));
    return close();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's message already says "syntax error while parsing ...".
    std::string what = e.what();
    if (auto colon = what.find("] "); colon != std::string::npos) what = what.substr(colon + 2);
    return fail("not valid JSON at byte " + std::to_string(position) + ": " + what);
  }

  Result<Json> take() {
    if (!error_.empty()) return Status::error(error_);
    return std::move(root_);
  }

 private:
  struct Frame {
    Json value;                                       // an array fills here; an object when it closes
    std::vector<std::pair<std::string, Json>> members;  // an object's, in order
    std::string key;                                  // the member being read
  };

  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  bool add(Json v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (f.value.is_array()) f.value.push_back(std::move(v));
    else f.members.emplace_back(std::move(f.key), std::move(v));
    return true;
  }

  bool open(Json empty) {
    if (static_cast<int>(frames_.size()) >= max_depth_)
      return fail("JSON nested deeper than " + std::to_string(max_depth_) + " levels (at " + path() + ")");
    frames_.push_back(Frame{std::move(empty), {}, {}});
    return true;
  }

  bool close() {
    Json done = std::move(frames_.back().value);
    frames_.pop_back();
    return add(std::move(done));
  }

  // Where the innermost open container is, as `a.b[3].c`, shortened.
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (out.size() > 120) return out + "...";
      if (f.value.is_array()) {
        out += '[';
        out += std::to_string(f.value.size());
        out += ']';
      } else {
        if (!out.empty()) out += '.';
        out += f.key;
      }
    }
    return out.empty() ? "the top" : out;
  }

  static Json build_object(std::vector<std::pair<std::string, Json>> members) {
    Json object = Json::object();
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      // A repeated key: the first position, the last value.
      std::unordered_map<std::string_view, size_t> first;
      std::vector<bool> repeated(members.size(), false);
      if (members.size() > 1)
        for (size_t i = 0; i < members.size(); ++i) {
          auto [it, fresh] = first.try_emplace(members[i].first, i);
          if (!fresh) {
            members[it->second].second = std::move(members[i].second);
            repeated[i] = true;
          }
        }
      members_of(object).reserve(members.size());
      for (size_t i = 0; i < members.size(); ++i)
        if (!repeated[i]) append_member(object, std::move(members[i].first), std::move(members[i].second));
    } else {
      auto& map = object.template get_ref<typename Json::object_t&>();
      for (auto& [k, v] : members) map.insert_or_assign(std::move(k), std::move(v));
    }
    return object;
  }

  const int max_depth_;
  std::vector<Frame> frames_;
  Json root_;
  std::string error_;
};

template <class Json>
Result<Json> read(std::string_view text, int max_depth) {
  TreeBuilder<Json> builder(max_depth);
  Json::sax_parse(text.begin(), text.end(), &builder);
  return builder.take();
}

}  // namespace

Result<nlohmann::json> read_json(std::string_view text, int max_depth) { return read<nlohmann::json>(text, max_depth); }

Result<nlohmann::ordered_json> read_ordered_json(std::string_view text, int max_depth) {
  return read<nlohmann::ordered_json>(text, max_depth);
}

nlohmann::ordered_json to_ordered_json(const nlohmann::json& value) {
  if (value.is_array()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& item : value) out.push_back(to_ordered_json(item));
    return out;
  }
  if (!value.is_object()) return nlohmann::ordered_json(value);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  members_of(out).reserve(value.size());
  for (const auto& [k, v] : value.items()) append_member(out, k, to_ordered_json(v));
  return out;
}

void append_member(nlohmann::ordered_json& object, std::string key, nlohmann::ordered_json value) {
  members_of(object).emplace_back(std::move(key), std::move(value));
}

}  // namespace revis
