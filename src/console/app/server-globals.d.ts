// The console's code type-checks against the server's routes (src/client imports the app's type), so the server's
// files are checked here too, under the DOM's types: Bun's own members of a global the DOM also declares are added.
interface Worker {
	ref(): void
	unref(): void
}
