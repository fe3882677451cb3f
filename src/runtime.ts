/** True inside the compiled binary (`bun build --compile`), whose own files live under Bun's embedded /$bunfs/. */
export const isCompiledBinary = Bun.main.startsWith('/$bunfs/')
