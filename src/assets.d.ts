// Files Bun embeds at build time: `with { type: 'text' }` yields the contents,
// `with { type: 'file' }` a path that also resolves inside the compiled binary.
declare module '*.sql' {
	const text: string
	export default text
}
declare module '*.wasm' {
	const path: string
	export default path
}
declare module '*.data' {
	const path: string
	export default path
}
declare module '*.tar.gz' {
	const path: string
	export default path
}
declare module '*.mustache' {
	const text: string
	export default text
}
declare module '*.css' {
	const text: string
	export default text
}
declare module '*.page.js' {
	const text: string
	export default text
}
