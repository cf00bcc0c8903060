// Package deploytest checks what deploy/ ships for Kubernetes: the plain
// manifests of deploy/kubernetes and the objects the Helm chart in
// deploy/helm/bouncer renders. Every object is decoded strictly into its
// Kubernetes API type, then checked for what running Bouncer needs:
// probes on the admin port its flags name, a restrictive security
// context, a drain that ends before the kubelet's SIGKILL, the config
// mounted as a directory where --config reads it, and Services, budgets
// and monitors that select the pods they are for.
//
// It is a module of its own, like bench/, so that Helm and the Kubernetes
// API types never enter the main module's go.mod.
package deploytest
