// The demo test pattern (web/demo/source.html draws it, receive.html verifies it). Pure: the
// expected bytes of the reference block are computed here, so a receiver can check a checksum
// of that region in every frame. Drawn only with scissored clears, so every byte is exact.
// No imports, so Node tests can load it too.

/** FNV-1a 32-bit over a rectangle of a top-down RGBA image (same as sync.js regionChecksum). */
export function regionChecksum(pixels, width, x, y, w, h) {
  let hash = 0x811c9dc5;
  for (let row = y; row < y + h; ++row) {
    for (let i = (row * width + x) * 4, end = i + w * 4; i < end; ++i) {
      hash ^= pixels[i];
      hash = Math.imul(hash, 0x01000193);
    }
  }
  return hash >>> 0;
}

/** Reference block: an 8x8 grid of 8-pixel cells at (32, 32), top-down coordinates. */
export const REF = Object.freeze({ x: 32, y: 32, cell: 8, cells: 8, size: 64 });

/** Exact RGBA bytes of reference cell (column i, row j); asymmetric, so flips and swaps show. */
export function refCellColor(i, j) {
  return [(i * 32 + 16) & 255, (j * 32 + 8) & 255, ((i * 7 + j * 13) * 9) & 255, 255];
}

/** FNV-1a of the reference block as it must appear in every frame. */
export function expectedRefChecksum() {
  const n = REF.size;
  const bytes = new Uint8Array(n * n * 4);
  for (let y = 0; y < n; ++y) {
    for (let x = 0; x < n; ++x) {
      const c = refCellColor(Math.floor(x / REF.cell), Math.floor(y / REF.cell));
      bytes.set(c, (y * n + x) * 4);
    }
  }
  return regionChecksum(bytes, n, 0, 0, n, n);
}

/** Checksum of the reference block in a top-down RGBA frame. */
export function refChecksum(pixels, width) {
  return regionChecksum(pixels, width, REF.x, REF.y, REF.size, REF.size);
}

/** Draws frame `index` of the pattern into a WebGL2 context (the whole drawing buffer). */
export function drawPattern(gl, width, height, index) {
  gl.disable(gl.SCISSOR_TEST);
  const t = index % 240;
  gl.clearColor((t & 63) / 255, ((t * 3) & 127) / 255, 96 / 255, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  gl.enable(gl.SCISSOR_TEST);
  // A bar moving one step a frame, and a block that walks down: frames differ visibly.
  const barW = 16;
  const x = (index * 8) % Math.max(1, width - barW);
  gl.scissor(x, 0, barW, height);
  gl.clearColor(1, 1, 1, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  const by = (index * 4) % Math.max(1, height - 32);
  gl.scissor(width - 48, height - by - 32, 32, 32); // GL y is bottom-up
  gl.clearColor(1, 0.5, 0, 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  // The reference block, drawn last so nothing covers it.
  for (let j = 0; j < REF.cells; ++j) {
    for (let i = 0; i < REF.cells; ++i) {
      const c = refCellColor(i, j);
      const top = REF.y + j * REF.cell;
      gl.scissor(REF.x + i * REF.cell, height - top - REF.cell, REF.cell, REF.cell);
      gl.clearColor(c[0] / 255, c[1] / 255, c[2] / 255, 1);
      gl.clear(gl.COLOR_BUFFER_BIT);
    }
  }
  gl.disable(gl.SCISSOR_TEST);
}

/** Same pattern on a 2D context (for the getImageData path). */
export function drawPattern2d(ctx, width, height, index) {
  const t = index % 240;
  ctx.fillStyle = `rgb(${t & 63},${(t * 3) & 127},96)`;
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = '#fff';
  ctx.fillRect((index * 8) % Math.max(1, width - 16), 0, 16, height);
  ctx.fillStyle = 'rgb(255,128,0)';
  ctx.fillRect(width - 48, (index * 4) % Math.max(1, height - 32), 32, 32);
  for (let j = 0; j < REF.cells; ++j) {
    for (let i = 0; i < REF.cells; ++i) {
      const c = refCellColor(i, j);
      ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`;
      ctx.fillRect(REF.x + i * REF.cell, REF.y + j * REF.cell, REF.cell, REF.cell);
    }
  }
}
