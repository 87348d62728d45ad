// Neo4j 5's own Cypher front end (@neo4j-cypher/language-support, the parser and semantic analysis of
// Neo4j's tools) over statements given as JSON on stdin: [{"name": "...", "text": "..."}, ...].
// Prints one JSON document: [{"name", "errors": [{"line", "column", "message"}], "warnings": [...]}, ...].
// Undefined parameters are not errors ($x is bound at run time); everything else of severity Error is.
// Run from anywhere: node tools/cypher-lint/lint.mjs < statements.json
import { readFileSync } from 'node:fs';
import { lintCypherQuery, isNotParamError } from '@neo4j-cypher/language-support';

const ERROR = 1; // vscode-languageserver DiagnosticSeverity.Error
const statements = JSON.parse(readFileSync(0, 'utf8'));
const schema = { defaultLanguage: 'CYPHER 5' };
const out = statements.map(({ name, text }) => {
  const { diagnostics } = lintCypherQuery(text, schema);
  const shown = diagnostics.filter(isNotParamError).map((d) => ({
    line: d.range.start.line + 1,
    column: d.range.start.character + 1,
    message: d.message,
    severity: d.severity,
  }));
  const strip = ({ severity, ...rest }) => rest;
  return {
    name,
    errors: shown.filter((d) => d.severity === ERROR).map(strip),
    warnings: shown.filter((d) => d.severity !== ERROR).map(strip),
  };
});
process.stdout.write(JSON.stringify(out) + '\n');
