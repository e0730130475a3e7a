/// @file corpus.h
/// @brief Reading a text corpus as documents (for tt_prepare_data): fortune files, paragraphs
/// or whole files, and the train/validation split rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tt {

/// How a text file is cut into documents.
enum class DocumentFormat {
  kAuto,       ///< kFortune when some line is exactly "%", otherwise kParagraph
  kFortune,    ///< fortune(6) files: entries separated by lines containing only "%"
  kParagraph,  ///< paragraphs separated by one or more blank lines
  kFile,       ///< the whole file is one document
};

/// Parses "auto", "fortune", "paragraph" or "file"; throws tt::Error otherwise.
DocumentFormat parse_document_format(std::string_view name);

/// Cuts one file's text into documents. Fortune entries and paragraphs keep their inner
/// newlines and end with a newline; empty (whitespace-only) documents are dropped.
std::vector<std::string> split_documents(std::string_view text, DocumentFormat format);

/// The input files of `path`: the file itself (a symbolic link given as `path` is followed), or
/// for a directory its regular files in name order, skipping hidden files, fortune's index
/// files (*.dat, *.u8), e.g. /usr/share/games/fortunes, and symbolic links: a link inside an
/// input directory is not followed (it may point back into the corpus and read a file twice).
/// When `skipped_links` is given, the paths of the skipped links (other than hidden files and
/// index files) are appended to it in name order, for the caller to name them. Throws tt::Error
/// when the path does not exist or has no files.
std::vector<std::string> list_input_files(const std::string& path,
                                          std::vector<std::string>* skipped_links = nullptr);

/// The split rule: document i (0-based, in corpus order) is a validation document when
/// floor((i+1) * val_fraction) > floor(i * val_fraction), i.e. every (1/val_fraction)-th
/// document (for 0.1: documents 9, 19, 29, ...). Spread over the whole corpus, so both splits
/// see every source file; exactly floor(n * val_fraction) of n documents are validation.
bool is_validation_document(int64_t index, double val_fraction);

}  // namespace tt
