// A fresh private directory under the system temp dir, removed with its
// files when the object goes (dlmctl demo's worker files; tests' databases).
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace dlm::oracle {

class TempDir {
 public:
  // `prefix` names the directory ("dlmctl-demo" -> /tmp/dlmctl-demo-XXXXXX).
  // Throws std::system_error when it cannot be created.
  explicit TempDir(const std::string& prefix) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX"))
            .string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(),
                              "creating a temporary directory " + tmpl);
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;  // best effort: a leftover temp dir harms nothing
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string.
  std::string file(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace dlm::oracle
