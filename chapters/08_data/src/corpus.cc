// Reading a corpus as documents: fortune entries, paragraphs or whole files.
#include "tt/corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tt/error.h"

namespace tt {
namespace {

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

// Calls fn(line, line_with_newline) for every line of text.
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    const std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line, text.substr(pos, next - pos));
    pos = next;
  }
}

}  // namespace

DocumentFormat parse_document_format(std::string_view name) {
  if (name == "auto") return DocumentFormat::kAuto;
  if (name == "fortune") return DocumentFormat::kFortune;
  if (name == "paragraph") return DocumentFormat::kParagraph;
  if (name == "file") return DocumentFormat::kFile;
  TT_THROW("parse_document_format: unknown format '", name,
           "' (expected auto, fortune, paragraph or file)");
}

std::vector<std::string> split_documents(std::string_view text, DocumentFormat format) {
  if (format == DocumentFormat::kAuto) {
    format = DocumentFormat::kParagraph;
    for_each_line(text, [&](std::string_view line, std::string_view) {
      if (line == "%") format = DocumentFormat::kFortune;
    });
  }
  std::vector<std::string> docs;
  auto flush = [&](std::string& doc) {
    if (!is_blank(doc)) {
      if (doc.back() != '\n') doc.push_back('\n');
      docs.push_back(std::move(doc));
    }
    doc.clear();
  };
  std::string doc;
  if (format == DocumentFormat::kFile) {
    doc = std::string(text);
    flush(doc);
    return docs;
  }
  for_each_line(text, [&](std::string_view line, std::string_view raw) {
    const bool separator = format == DocumentFormat::kFortune ? line == "%" : is_blank(line);
    if (separator) {
      flush(doc);
    } else {
      doc += raw;
    }
  });
  flush(doc);
  return docs;
}

std::vector<std::string> list_input_files(const std::string& path,
                                          std::vector<std::string>* skipped_links) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  TT_CHECK(!ec && fs::exists(st), "list_input_files: '", path, "' does not exist");
  if (!fs::is_directory(st)) return {path};
  std::vector<std::string> files, links;
  for (const fs::directory_entry& e : fs::directory_iterator(path)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (name.empty() || name[0] == '.' || ext == ".dat" || ext == ".u8") continue;
    if (e.is_symlink()) {
      links.push_back(e.path().string());
    } else if (e.is_regular_file()) {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::sort(links.begin(), links.end());
  if (files.empty()) {
    TT_CHECK(!links.empty(), "list_input_files: directory '", path, "' has no input files");
    TT_THROW("list_input_files: directory '", path,
             "' has no input files (symbolic links inside it are not followed; give them as "
             "--input to read them: ",
             links, ")");
  }
  if (skipped_links != nullptr)
    skipped_links->insert(skipped_links->end(), links.begin(), links.end());
  return files;
}

bool is_validation_document(int64_t index, double val_fraction) {
  TT_CHECK(val_fraction >= 0.0 && val_fraction < 1.0,
           "is_validation_document: val_fraction must be in [0, 1), got ", val_fraction);
  return std::floor(static_cast<double>(index + 1) * val_fraction) >
         std::floor(static_cast<double>(index) * val_fraction);
}

}  // namespace tt
