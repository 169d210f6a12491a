// web/sync.d.ts under strict TypeScript: the examples in docs/web.md (every ```js block) must
// type-check against the declarations, as a page author's editor would check them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../../..');

test('docs/web.md examples type-check against web/sync.d.ts with --strict', async () => {
  const doc = await readFile(path.join(repo, 'docs/web.md'), 'utf8');
  const blocks = [...doc.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  const pkg = JSON.parse(await readFile(path.join(repo, 'web/package.json'), 'utf8'));
  assert.ok(blocks.length >= 2, `examples found: ${blocks.length}`);
  const dir = await mkdtemp(path.join(tmpdir(), 'sync-typings-'));
  try {
    const files = [];
    for (const [i, body] of blocks.entries()) {
      // Each example is a module of a page: the canvases it names are the page's.
      const src = `declare const canvas: HTMLCanvasElement;\ndeclare const outCanvas: HTMLCanvasElement;\n` +
        body.replaceAll("'/web/sync.js'", JSON.stringify(path.join(repo, 'web/sync.js')))
          // The package's name (web/package.json) is the same module.
          .replaceAll(`'${pkg.name}'`, JSON.stringify(path.join(repo, 'web/sync.js'))) + '\nexport {};\n';
      const file = path.join(dir, `example${i}.ts`);
      await writeFile(file, src);
      files.push(file);
    }
    const tsc = path.join(here, '../node_modules/typescript/bin/tsc');
    const args = ['--strict', '--noEmit', '--target', 'es2022', '--module', 'es2022', '--moduleResolution', 'bundler',
      '--lib', 'es2022,dom,dom.iterable', '--allowJs', 'false', '--skipLibCheck', 'false', ...files];
    // Run from the temporary folder: tsc then takes no @types packages from tests/browser's
    // node_modules (some test dependencies bring DOM typings that clash with lib.dom's).
    const out = await new Promise((resolve) => execFile(process.execPath, [tsc, ...args], { cwd: dir }, (err, stdout, stderr) => resolve({ code: err?.code ?? 0, text: stdout + stderr })));
    assert.equal(out.code, 0, out.text);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('every runtime export of web/sync.js is declared in web/sync.d.ts', async () => {
  const mod = await import(path.join(repo, 'web/sync.js'));
  const dts = await readFile(path.join(repo, 'web/sync.d.ts'), 'utf8');
  const declared = new Set([...dts.matchAll(/^export (?:declare )?(?:abstract )?(?:async )?(?:function|class|const|let|var|interface|type|enum) ([A-Za-z0-9_$]+)/gm)].map((m) => m[1]));
  const missing = Object.keys(mod).filter((name) => !declared.has(name));
  assert.deepEqual(missing, [], `exported by sync.js, not declared in sync.d.ts: ${missing.join(', ')}`);
});
