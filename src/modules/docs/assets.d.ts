// The Scalar browser bundle, imported `with { type: 'file' }`: a path that also resolves inside the compiled binary.
declare module '*/standalone.js' {
	const path: string
	export default path
}
