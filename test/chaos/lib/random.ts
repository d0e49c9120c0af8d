/** A seeded random source for the fuzzers, so that a failure can be replayed with CHAOS_SEED. */
export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 1;
  }
  /** mulberry32 */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(below: number): number {
    return Math.floor(this.next() * below);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  some<T>(items: readonly T[]): T[] {
    return items.filter(() => this.chance(0.3));
  }
  string(): string {
    return this.pick([
      '',
      ' ',
      'a',
      '../../etc/passwd',
      '%00',
      '\u0000',
      'é✓😀',
      "'; DROP TABLE records; --",
      '<script>alert(1)</script>',
      'x'.repeat(300),
      '-1',
      '1e309',
      'null',
      '__proto__',
      'constructor',
      '${{7*7}}',
      `r${this.int(1000)}`,
    ]);
  }
  scalarText(): string {
    return this.pick([this.string(), String(this.int(1e6) - 500), 'true', '[]', '{}', '1.5', '99999999999999999999']);
  }
  value(depth: number): unknown {
    const kind = this.int(depth > 0 ? 8 : 6);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return this.chance(0.5);
      case 2:
        return this.pick([0, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2]);
      case 3:
      case 4:
        return this.string();
      case 5:
        return this.scalarText();
      case 6:
        return Array.from({ length: this.int(4) }, () => this.value(depth - 1));
      default:
        return Object.fromEntries(
          Array.from({ length: this.int(4) }, () => [this.string(), this.value(depth - 1)] as [string, unknown]),
        );
    }
  }
  /** An object with the route's own property names, each set to something random, plus strays. */
  mutatedObject(properties: readonly string[]): Record<string, unknown> {
    const object: Record<string, unknown> = {};
    for (const name of properties) if (this.chance(0.8)) object[name] = this.value(2);
    if (this.chance(0.3)) object[this.string()] = this.value(1);
    if (this.chance(0.1)) object['__proto__'] = { polluted: true };
    return object;
  }
}
