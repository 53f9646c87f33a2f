// A minimal stand-in of Flamenco 3's job-compiler environment (author.Task, author.Command,
// job.addTask, task.addDependency, print), enough to run a job type's compileJob under Node.
// It is not Flamenco: it records what the compiler authors and prints it as JSON.
// Usage: node flamenco_standin.js JOB_TYPE.js SETTINGS.json
"use strict";
const fs = require("fs");
const vm = require("vm");

const [script, settingsFile] = process.argv.slice(2);
const settings = JSON.parse(fs.readFileSync(settingsFile, "utf8"));
const printed = [];

function Task(name, type) {
    const task = { name, type, commands: [], dependencies: [] };
    task.addCommand = (cmd) => task.commands.push(cmd);
    task.addDependency = (other) => {
        if (!other || !other.name) throw "addDependency needs a task";
        task.dependencies.push(other.name);
    };
    return task;
}

const author = {
    Task,
    Command: (name, parameters) => ({ name, parameters }),
};
const job = { settings, tasks: [], addTask(task) { this.tasks.push(task); } };
const context = vm.createContext({ author, print: (...a) => printed.push(a.join(" ")), JSON, Set, Array });
// The job type's top-level const and function, as Flamenco's runtime sees them.
const jobType = vm.runInContext(fs.readFileSync(script, "utf8") + "\n;({ JOB_TYPE, compileJob });", context,
                                { filename: script });
let error = null;
try {
    jobType.compileJob(job);
} catch (e) {
    error = String(e);
}
const out = {
    error,
    printed,
    label: jobType.JOB_TYPE.label,
    settings: jobType.JOB_TYPE.settings.map((s) => s.key),
    tasks: job.tasks.map((t) => ({ name: t.name, type: t.type, dependencies: t.dependencies,
                                   commands: t.commands })),
};
process.stdout.write(JSON.stringify(out));
