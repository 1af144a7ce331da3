"""Control of the machine a run happens on: CPUs, cgroups, namespaces, processes, paths."""
