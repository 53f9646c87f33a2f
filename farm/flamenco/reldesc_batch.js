// SPDX-License-Identifier: GPL-3.0-or-later
//
// Flamenco 3 custom job type: run a blender_reldesc batch manifest on a Flamenco farm.
// One task per manifest job, task type "blender", each running
//     blender -b -y FILE -c reldesc <operation> <options...>
// on a worker whose Blender has the blender_reldesc extension enabled. A job that needs another
// job's output (a bake of the binding a bind job saves) depends on that job's task.
//
// The job's settings come from the manifest, resolved by
//     python -m blender_reldesc batch MANIFEST.toml --flamenco-settings SETTINGS.json
// (paths made absolute: they must be valid on the workers, e.g. on a shared drive).
// Install: copy this file into the "scripts" folder next to flamenco-manager and restart it.

const JOB_TYPE = {
    label: "RelDesc Batch",
    description: "Adapt motion to changed scenes: the jobs of a blender_reldesc manifest",
    settings: [
        { key: "manifest", type: "string", subtype: "file_path", required: true, visible: "web",
          description: "The manifest the jobs come from (for reference)" },
        { key: "jobs_json", type: "string", required: true, visible: "hidden",
          description: "The manifest's jobs as JSON (from 'batch --flamenco-settings')" },
    ],
};

function parseJobs(settings) {
    let items;
    try {
        items = JSON.parse(settings.jobs_json);
    } catch (e) {
        throw `jobs_json is not valid JSON: ${e}`;
    }
    if (!Array.isArray(items) || items.length === 0) {
        throw "the manifest has no jobs";
    }
    const names = new Set();
    for (const item of items) {
        if (!item.name || !item.file || !Array.isArray(item.args) || item.args.length === 0) {
            throw `job ${JSON.stringify(item)} needs a name, a file and a command`;
        }
        if (names.has(item.name)) {
            throw `two jobs are named ${item.name}`;
        }
        names.add(item.name);
    }
    for (const item of items) {
        for (const need of item.needs || []) {
            if (!names.has(need)) {
                throw `job ${item.name} needs job ${need}, which is not in the manifest`;
            }
        }
    }
    return items;
}

function authorTask(item) {
    const task = author.Task(item.name, "blender");
    const command = author.Command("blender-render", {
        exe: "{blender}",
        exeArgs: "{blenderArgs}",
        argsBefore: [],
        blendfile: item.file,
        args: ["-c", "reldesc"].concat(item.args),
    });
    task.addCommand(command);
    return task;
}

function compileJob(job) {
    const items = parseJobs(job.settings);
    const tasks = {};
    for (const item of items) {
        tasks[item.name] = authorTask(item);
    }
    for (const item of items) {
        for (const need of item.needs || []) {
            tasks[item.name].addDependency(tasks[need]);
        }
        job.addTask(tasks[item.name]);
    }
    print(`RelDesc Batch: ${items.length} tasks from ${job.settings.manifest}`);
}
