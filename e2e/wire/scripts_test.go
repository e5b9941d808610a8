package wire

// scripts are every script TestWire runs.
func scripts() []script {
	var all []script
	all = append(all, basicScripts()...)
	all = append(all, callScripts()...)
	all = append(all, trafficScripts()...)
	all = append(all, catalogScripts()...)
	all = append(all, taskScripts()...)
	all = append(all, httpScripts()...)
	all = append(all, frameScripts()...)
	return all
}

func basicScripts() []script {
	return []script{
		{name: "handshake", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("ping", "")
		}},
	}
}
