package web

import (
	"embed"
	"io/fs"
)

//go:embed assets
var assets embed.FS

// assetsFS is the page: index.html, app.js and app.css, embedded in the
// binary (no build step, nothing fetched from elsewhere).
func assetsFS() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed directive names the folder: it is there
	}
	return sub
}
